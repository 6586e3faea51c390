"""Sphinx configuration of the skbong documentation.

Build (CI runs exactly this, warnings are errors)::

    python3 -m pip install -q -e ".[docs]"
    python3 -m sphinx -W --keep-going -b html docs docs/_build/html

The build needs no network (CI has none but the package registries): no intersphinx
inventories are fetched, so links to other projects' documentation are not made. The
gallery examples (``examples/plot_*.py``) run during the build.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

from docutils import nodes
from sphinx.ext import autosummary

import skbong

# -- Project -----------------------------------------------------------------------------

project = "skbong"
author = "the skbong developers"
copyright = f"2026, {author}"
version = release = skbong.__version__

# -- General -----------------------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    # Renders the markdown benchmark reports included by benchmarks.rst.
    "myst_parser",
]

root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "Thumbs.db", ".DS_Store"]
# ``code`` is inline code throughout (as in the docstrings), not a cross-reference.
default_role = "literal"

# -- API reference: autosummary + numpydoc ------------------------------------------------

autosummary_generate = True
# The summary column of the API tables is a docstring's first sentence. The docstrings
# cite the papers as "Eq. 5", "Sec. 3", "Prop. 4.1": not the end of a sentence.
autosummary.WELL_KNOWN_ABBREVIATIONS = (
    *autosummary.WELL_KNOWN_ABBREVIATIONS, " Eq.", " Eqs.", " Sec.", " Prop.", " App."
)
autodoc_typehints = "none"  # the numpydoc sections state types and shapes
# Attributes and methods are listed by the autosummary class template, not by numpydoc.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# -- Examples gallery --------------------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Every plot_*.py is executed and its figures and output are captured; a failing
    # example fails the build (after every example has run).
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("skbong",),
    # Feeds the "Examples using ..." mini-galleries on the API pages.
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skbong": None},
}

# -- HTML --------------------------------------------------------------------------------

html_theme = "alabaster"
html_title = f"skbong {release}"
html_theme_options = {
    "description": "Online Bayesian neural networks as scikit-learn estimators, on JAX.",
    "fixed_sidebar": True,
    # Room for the 100-column code and the wide benchmark tables.
    "page_width": "1180px",
}
html_static_path: list[str] = []
html_show_sourcelink = False

# -- Markdown reports --------------------------------------------------------------------


def _rebase_markdown_images(app, doctree) -> None:
    """Resolve the image paths of included markdown files against the file, as GitHub does.

    ``benchmarks/results/digits_grid.md`` embeds its plot as ``![...](digits_grid.png)``;
    Sphinx would look for it beside the page that includes the report. Runs before
    Sphinx collects the images (priority 500). URLs and absolute paths are left alone.
    """
    page_dir = Path(doctree["source"]).parent
    for node in doctree.findall(nodes.image):
        uri = node["uri"]
        if not (node.source or "").endswith(".md") or "://" in uri or uri.startswith("/"):
            continue
        node["uri"] = Path(os.path.relpath(Path(node.source).parent / uri, page_dir)).as_posix()


def _skip_scikit_learn_members(app, what, name, obj, skip, options):
    """Leave out the methods the estimators inherit from scikit-learn.

    ``score``, ``get_params``, ``set_params`` and the metadata-routing methods are
    documented by scikit-learn; their docstrings refer to labels of scikit-learn's own
    documentation, which an offline build (no intersphinx) cannot resolve. The
    estimator template names them instead.
    """
    if (getattr(obj, "__module__", None) or "").startswith("sklearn."):
        return True
    return None


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """Show ``__init__``'s parameters for classes whose metaclass hides them.

    flax's ``nnx.Module`` metaclass defines ``__call__(*args, **kwargs)``, so autodoc
    would print ``MLP(*args, **kwargs)``.
    """
    if what != "class" or signature != "(*args, **kwargs)":
        return None
    parameters = list(inspect.signature(obj.__init__).parameters.values())[1:]  # drop self
    parameters = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    return str(inspect.Signature(parameters)), return_annotation


def setup(app):
    app.connect("doctree-read", _rebase_markdown_images, priority=400)
    app.connect("autodoc-skip-member", _skip_scikit_learn_members)
    app.connect("autodoc-process-signature", _init_signature)
