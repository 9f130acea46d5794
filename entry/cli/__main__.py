from empeval.cli import main

main()
