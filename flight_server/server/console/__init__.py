"""The web console (docs/console.md): pages over HTTP(S) showing the catalog to its users.

``pages`` builds what a page shows through the server's query path and rights; ``charts`` lays out
its SVG charts; ``web`` is the Flask application (routes, authentication, security headers);
``server`` runs it on cheroot, on its own port and threads, off unless ``console_port`` is set.
"""

from catalog.optional import check_installed

# the console's libraries come with the server extra; a missing one is reported here, naming it
check_installed("server", "the hudi-flight web console", "flask", "cheroot")
