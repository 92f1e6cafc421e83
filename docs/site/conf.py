# Sphinx configuration of the browsable edition, built by `./course site` (tools/build_site.py), which copies
# this folder into build/site-src/ beside the pages it makes from the executed notebooks.
project = "Feed the Beast"
author = "the Feed the Beast authors"
copyright = "the Feed the Beast authors"

extensions = ["myst_nb"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
nb_execution_mode = "off"          # the outputs are the GPU run's; nothing runs while the site builds
nb_merge_streams = True
# A code cell's text is the student's stub; the page keeps no copy of any source notebook.
html_copy_source = False
html_show_sourcelink = False
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
# The title names the edition's GPU: tools/build_site.py sets it (-D html_title=...) for each edition it builds.
html_title = "Feed the Beast"
html_theme_options = {
    "repository_url": "https://github.com/feed-the-beast/feed-the-beast",
    "use_repository_button": True,
    "use_download_button": False,
    "show_toc_level": 2,
}
html_static_path = ["_static"]
html_css_files = ["course.css"]
