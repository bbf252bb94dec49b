"""The LSP wire: pygls' protocol with its fixes, stdio and socket transports, conversions."""
