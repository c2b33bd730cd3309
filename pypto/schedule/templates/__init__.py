"""Hand-written default schedule templates, one module per op family (registered with
:func:`pypto.schedule.defaults.template`). Each returns plain directives: data, like every schedule."""
