"""Calls from the phone network: Twilio Media Streams as another live
dialect on the same data path (docs/telephony.md)."""
