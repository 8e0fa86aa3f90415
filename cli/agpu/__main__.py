from agpu.cli import main

main()
