"""View models of the report pages, one module per page (common.py what they share): store rows in, small
immutable objects out. A name is imported from the module that defines it; this package re-exports none.

Everything here but health.gather (the health panel's reads) is a pure function of its arguments (no database,
no clock, no settings lookup), so the page logic that matters — slot states, push status, ordering, which links
carry a signature, what counts as a safe link — is tested without a server. Templates only lay out what these
objects hold.

Text from articles and from the LLM is never marked safe here, with one exception: the daily digest,
rendered by markdown-it with raw HTML disabled and no link but this app's own page links (a URL the LLM
wrote stays text; common.render_markdown).
"""
