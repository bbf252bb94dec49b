"""Fill in the middle: which form an engine honours (the probe) and the models' FIM templates."""
