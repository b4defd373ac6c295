"""Classes found by name among the subclasses defined so far, so that a
base class can build the subclass a file names without importing the
modules above it (their package imports them all)."""


def subclass_named(base, name):
    """The class called `name` among `base` and its subclasses, at any
    depth; None when there is none."""
    classes = [base]
    while classes:
        cls = classes.pop()
        if cls.__name__ == name:
            return cls
        classes.extend(cls.__subclasses__())
    return None
