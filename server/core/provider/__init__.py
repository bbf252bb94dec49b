"""The one provider contract and the stream a consumer reads from it."""
