"""Decide and push: which analyses are one event, what is pushed and in what order, the messages' words and forms, delivery exactly once per channel."""
