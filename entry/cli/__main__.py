from entry.cli import main

main()
