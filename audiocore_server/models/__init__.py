"""The live model services: Gemini Live and OpenAI Realtime as ADK models, what
ADK's live request asks of a model, a provider's refusal in words fit for the
client, and the played-position port a model connection reads (the live
connection implements it). Nothing outside this package imports a provider
module; the rest of the server reaches them through ``models.choice``."""
