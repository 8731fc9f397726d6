"""The command lines' shared machinery: flags generated from a config's fields, and one handler that
turns a user's mistake into one line naming the input and what to do."""
