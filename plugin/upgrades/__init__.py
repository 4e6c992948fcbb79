"""Store upgrades run beside the serving plugin: keyword and token vectors filled in."""
