# Helper module copied into the generated program by the `files` target property (FilesList).
def triple(x):
    return 3 * x

NAME = "alpha"
