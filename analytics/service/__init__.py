"""``lockstep analytics serve``: the refresh as plain code over a source of answers (``refresh``,
``fetch``, ``source``), what it keeps between refreshes as plain data (``state``, ``resume``), the typed
job views (``views``), the aiohttp app (``app``, ``routes``, ``keys``) and its ``/metrics``
(``metrics``), configured once (``config``)."""
