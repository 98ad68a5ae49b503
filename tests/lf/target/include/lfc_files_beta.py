# Helper module copied into the generated program by the `files` target property (FilesList).
class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm1(self):
        return abs(self.x) + abs(self.y)
