// MQTT
