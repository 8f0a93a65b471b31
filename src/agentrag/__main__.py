from agentrag.cli.main import main

main()
