"""A module that looks like a HEAR module but has no get_scene_embeddings (for the error test)."""


def load_model(model_file_path: str = ""):
    return object()
