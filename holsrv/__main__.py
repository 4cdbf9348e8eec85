from holsrv.main import main

main()
