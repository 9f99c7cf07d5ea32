/* a build variant in general code (tests/house.py) */
#if defined(DT_WITH_DNNL)
#endif
