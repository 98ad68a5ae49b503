# Helper module for the A-L basic conformance programs (DelayStruct*, copied via the `files` target property).


class hello:
    """A small mutable record carried through actions and connections."""

    def __init__(self, name="", value=0):
        self.name = name
        self.value = value

    def __repr__(self):
        return "hello(" + repr(self.name) + ", " + repr(self.value) + ")"
