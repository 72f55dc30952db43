from pelab.cli import main

main()
