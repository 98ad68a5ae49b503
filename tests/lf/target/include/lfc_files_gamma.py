# Helper module copied into the generated program by the `files` target property
# (FilesSinglePath, FilesString).
GREETING = "hello from gamma"

def add(a, b):
    return a + b
