"""S3, GCS, Azure and AIStore's S3 gateway through obstore: settings, errors, uploads."""

from .backend import ObstoreStore

__all__ = ["ObstoreStore"]
