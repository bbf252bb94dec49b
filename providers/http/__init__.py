"""What the HTTP providers share: the client, errors, framing, the stream reader."""
