// CommandLineSupport
