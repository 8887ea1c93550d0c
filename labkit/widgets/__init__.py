"""Python side of labkit's widgets (traits only).

The front-end code lives in ``widgets/src/`` of the checkout and is bundled by
esbuild into ``labkit/widgets/static/`` (built, not committed). See
:mod:`labkit.widgets._assets` for how the built bundles are found and checked.
"""

__all__: list[str] = []
