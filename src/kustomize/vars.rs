//! Vars: `$(NAME)` references expanded from fields of other objects.
