"""Kafka clients: the two backends (kafka-python, confluent-kafka), their options,
topic ranges, and the factory that picks one."""
