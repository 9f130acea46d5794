"""Errors the web layer turns into 4xx JSON answers: each carries its HTTP status and a clear message."""


class AnnotationError(Exception):
    status = 400

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class NotFound(AnnotationError):
    status = 404


class Forbidden(AnnotationError):
    status = 403


class Conflict(AnnotationError):
    status = 409
