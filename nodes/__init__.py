"""ComfyUI nodes of the pack: one node per module, mappings derived from one table."""

NODE_MODULES: tuple = ()

NODE_CLASS_MAPPINGS = {cls.NODE_ID: cls for cls in NODE_MODULES}
NODE_DISPLAY_NAME_MAPPINGS = {cls.NODE_ID: cls.DISPLAY_NAME for cls in NODE_MODULES}
