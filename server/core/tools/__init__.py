"""The typed tool contract and the executor that runs tool plugins."""
