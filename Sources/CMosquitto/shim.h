#ifndef BEACONBRIDGE_CMOSQUITTO_SHIM_H
#define BEACONBRIDGE_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
