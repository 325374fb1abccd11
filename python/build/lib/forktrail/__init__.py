"""forktrail from Python: a client for ``forktrail serve`` and a session store for the
OpenAI Agents SDK with share-don't-copy branches and provenance.

>>> from forktrail import Client, ForktrailSession  # doctest: +SKIP
>>> session = ForktrailSession("conversation_123", Client(token="secret"))  # doctest: +SKIP
>>> result = await Runner.run(agent, "Hello", session=session)  # doctest: +SKIP
>>> retry = await session.fork(at=1, label="retry")  # doctest: +SKIP
"""

from .agents import ForktrailSession
from .client import Client, ForktrailError

__all__ = ["Client", "ForktrailError", "ForktrailSession"]
__version__ = "0.1.0"
