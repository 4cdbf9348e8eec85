"""holctl's commands by family: questions about a file, the fleet, the service."""
