class AsyncEngineArgs:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
