"""Loop IR: expressions, statements, buffers, PrimFunc, visitors, passes and the interpreter."""

from .expr import *  # noqa: F401,F403
from .expr import cast  # noqa: F401
from .buffer import Buffer, decl_buffer  # noqa: F401
from .stmt import *  # noqa: F401,F403
from .stmt import is_no_op  # noqa: F401
from .function import PrimFunc  # noqa: F401
from .functor import Visitor, Mutator, post_order_visit, substitute  # noqa: F401
from .op import *  # noqa: F401,F403
from .op import abs, min, max, round, pow, all, any  # noqa: F401,A004
