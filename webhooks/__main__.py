from webhooks.ops.cli import main

main()
