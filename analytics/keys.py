"""The analytics app's typed keys: apart from the app factory (``analytics.service``) and the handlers
(``analytics.routes``), so that both import them and neither imports the other."""
from __future__ import annotations

import asyncio

from aiohttp import web

from analytics.config import ServiceConfig
from analytics.prometheus import PrometheusSource
from analytics.promsession import Credentials
from analytics.refresh import RefreshState
from exporters.exposition import Encoder

CONFIG = web.AppKey("config", ServiceConfig)
STATE = web.AppKey("state", RefreshState)
ENCODER = web.AppKey("encoder", Encoder)                  # caches each series' exposition prefix
REFRESHED = web.AppKey("refreshed", asyncio.Event)        # set after each refresh attempt (tests wait on it)
SOURCE = web.AppKey("source", PrometheusSource)
CREDENTIALS = web.AppKey("credentials", Credentials)     # sent to Prometheus; hidden in what the app shows
