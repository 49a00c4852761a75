from webhooks.cli import main

main()
