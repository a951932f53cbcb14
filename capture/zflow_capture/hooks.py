"""Seeing every module call with its keyword arguments, on any torch version.

torch >= 2.1 forward hooks take with_kwargs=True, and always_call=True tells
when a forward raised. Older torch (Debian's 1.13) passes hooks the positional
arguments only, so there the module's forward is shadowed by an instance
attribute that sees the call exactly as made.
"""

import functools
import inspect

from torch import nn


def _hooks_take_kwargs():
    pre = inspect.signature(nn.Module.register_forward_pre_hook).parameters
    post = inspect.signature(nn.Module.register_forward_hook).parameters
    return "with_kwargs" in pre and "with_kwargs" in post and "always_call" in post


KWARGS_HOOKS = _hooks_take_kwargs()


def attach(module, enter, leave, abandon):
    """Call enter(args, kwargs) before module's forward runs, leave(result)
    after it returns, and abandon() if it raises. Returns a function that
    undoes the attachment."""
    if KWARGS_HOOKS:
        return _attach_hooks(module, enter, leave, abandon)
    return _wrap_forward(module, enter, leave, abandon)


def _attach_hooks(module, enter, leave, abandon):
    # Every hook returns None: anything else would replace the arguments or the result.
    left = [False]

    def pre(_module, args, kwargs):
        enter(args, kwargs)

    def post(_module, _args, _kwargs, result):
        left[0] = True
        leave(result)

    def after(_module, _args, _kwargs, _result):
        # Runs right after post when forward returned, alone when it raised.
        if not left[0]:
            abandon()
        left[0] = False

    handles = [
        module.register_forward_pre_hook(pre, with_kwargs=True),
        module.register_forward_hook(post, with_kwargs=True),
        module.register_forward_hook(after, with_kwargs=True, always_call=True),
    ]

    def detach():
        for h in handles:
            h.remove()

    return detach


def _wrap_forward(module, enter, leave, abandon):
    own = module.__dict__.get("forward")  # a forward already set on the instance
    inner = module.forward

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        enter(args, kwargs)
        try:
            result = inner(*args, **kwargs)
        except BaseException:
            abandon()
            raise
        leave(result)
        return result

    module.forward = forward

    def detach():
        if own is not None:
            module.forward = own
        else:
            del module.forward

    return detach
