"""Planning what to run: a matrix TOML file expanded into scenarios, the registries' rules over
them (engine, data kind, family), the data-kind registry and its readers, and the plan-time checks
every command shares (planning.plan_scenarios)."""
