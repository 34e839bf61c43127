"""The analytics app's typed keys: apart from the app factory (``lockstep.analytics.service.app``) and the handlers
(``lockstep.analytics.service.routes``), so that both import them and neither imports the other."""
from __future__ import annotations

import asyncio

from aiohttp import web

from lockstep.analytics.prom.session import Credentials
from lockstep.analytics.service.config import ServiceConfig
from lockstep.analytics.service.refresh import RefreshState
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.toolkit.exposition import Encoder

CONFIG = web.AppKey("config", ServiceConfig)
STATE = web.AppKey("state", RefreshState)
ENCODER = web.AppKey("encoder", Encoder)                  # caches each series' exposition prefix
REFRESHED = web.AppKey("refreshed", asyncio.Event)        # set after each refresh attempt (tests wait on it)
SOURCE = web.AppKey("source", PrometheusSource)
CREDENTIALS = web.AppKey("credentials", Credentials)     # sent to Prometheus; hidden in what the app shows
