"""The assistant turn: the loop that calls the model and its tools, storing what it produced, NO_REPLY, and which messages of a resent history are new."""
