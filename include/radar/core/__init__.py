"""The ground every room stands on: the settings, the database, outgoing HTTP, redaction, text, the Shanghai clock's slots and deadlines, signing, prices of a call, search lexemes."""
