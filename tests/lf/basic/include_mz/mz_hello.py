"""Payload class copied next to the generated program via the `files` target property."""


class hello:
    def __init__(self, name="", value=0):
        self.name = name
        self.value = value

    def scale(self, factor):
        self.value *= factor

    def __repr__(self):
        return f"hello({self.name!r}, {self.value!r})"
