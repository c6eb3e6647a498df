from personalq.cli import main

main()
